#!/usr/bin/env bash
# The CUDA paths the CPU test suite cannot run, as one script for the first GPU machine.
#
#   scripts/gpu-check.sh            # from the repository root, openmle importable
#
# Prints one line per check ("PASS name", "FAIL name: detail" or "SKIP name: why") and a final
# summary line; exits non-zero when any check fails. Budget: under 10 minutes on one GPU (each
# check has its own timeout; QLoRA needs bitsandbytes and the vLLM check needs vllm, each
# reported as SKIP when missing). Status: written without a GPU; it has NOT yet run on one.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="${PYTHONPATH:-$PWD/src}"
PY="${PYTHON:-python}"
fails=0
check() {  # check NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2; shift 2
  local log; log=$(mktemp)
  if timeout "$limit" "$@" >"$log" 2>&1; then
    echo "PASS $name"
  else
    echo "FAIL $name: $(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-300)"
    fails=$((fails + 1))
  fi
  rm -f "$log"
}

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "SKIP all: torch.cuda.is_available() is False"
  exit 1
fi
"$PY" -c "import torch; print('INFO device', torch.cuda.get_device_name(0), 'torch', torch.__version__)"

# 1. bf16 autocast + fused AdamW in our trainers (one GSPO and one SFT step on CUDA)
check "gspo-bf16-fused-adamw" 120 "$PY" - <<'PY'
import math, torch
from openmle.train import GSPOConfig, GSPOTrainer, RolloutBatch, TinyCausalLM, TinyLMConfig
m = TinyCausalLM(TinyLMConfig(vocab_size=64, dim=64, n_layers=2, n_heads=2)).cuda()
t = GSPOTrainer(m, GSPOConfig(lr=1e-3, bf16=True))
assert t.optimizer.defaults.get("fused") is True, t.optimizer.defaults
b = RolloutBatch.from_sequences([[1, 2, 3]] * 4, [[4, 5, 6, 7]] * 4, [1.0, -1.0, 0.5, -0.5],
                                pad_token_id=0, rollout_logprobs=[[-1.0] * 4] * 4)
with torch.autocast("cuda", dtype=torch.bfloat16):
    assert m(input_ids=b.input_ids.cuda()).logits.dtype == torch.bfloat16
metrics = t.step(b)
assert math.isfinite(metrics["loss"]) and t.step_count == 1, metrics
PY
check "sft-bf16-schedule" 120 "$PY" - <<'PY'
import math
from openmle import Message
from openmle.train import ByteTokenizer, SFTBatch, SFTConfig, SFTTrainer, TinyCausalLM, TinyLMConfig
b = SFTBatch.from_messages(ByteTokenizer(), [[Message(role="user", content="q"),
                                              Message(role="assistant", content="a")]] * 2)
t = SFTTrainer(TinyCausalLM(TinyLMConfig(dim=32, n_layers=1, n_heads=2)).cuda(),
               SFTConfig.paper(lr=1e-3, epochs=2))
out = t.fit([b, b])
assert len(out) == 4 and all(math.isfinite(m["loss"]) for m in out), out
PY
# 2. the CUDA tests of the trainers (checkpoint resume on CUDA, DDP-free)
check "trainer-cuda-tests" 180 "$PY" -m pytest -q -p no:cacheprovider -x \
  tests/unit/train/test_gspo.py tests/unit/train/test_sft.py -k cuda
# 3. TRL integration on CUDA: GRPOTrainer (GSPO) on LocalSandbox rewards, SFTTrainer on the export
check "trl-integration-cuda" 300 env OPENMLE_TEST_DEVICE=cuda "$PY" -m pytest -q \
  -p no:cacheprovider -x tests/integration/train/test_trl_integration.py
# 4. the local sandbox's GPU lease and CUDA_VISIBLE_DEVICES mapping
check "sandbox-gpu-lease" 120 "$PY" -m pytest -q -p no:cacheprovider -x \
  tests/unit/backends/test_gpu.py
check "sandbox-cuda-visible-devices" 180 "$PY" - <<'PY'
import tempfile
from pathlib import Path
import anyio
from attrs import frozen
from openmle import Job, Resources, Split
from openmle.backends import LocalSandbox

@frozen
class Grade:
    score: float | None
    valid: bool
    reason: str

@frozen
class Task:  # the smallest TaskHandle: any submission scores 1
    root: Path
    name: str = "gpu-check"
    @property
    def private_paths(self) -> tuple[Path, ...]:
        return (self.root / "private",)
    def public_dir(self, split: Split) -> Path:
        return self.root / "public"
    def grade(self, submission: Path, split: Split) -> Grade:
        return Grade(1.0, True, "")

root = Path(tempfile.mkdtemp())
for d in ("public", "private"):
    (root / d).mkdir()
task = Task(root)
code = ("import os, torch; v = os.environ.get('CUDA_VISIBLE_DEVICES');"
        "print('VISIBLE', v, torch.cuda.device_count()); open('submission.csv', 'w').write('1')")
async def main() -> None:
    async with LocalSandbox(resolver=lambda ref: task) as sb:
        job = Job(code=code, task="gpu-check", resources=Resources(gpus=1), timeout_s=120)
        r = await sb.run(job)
        assert "VISIBLE" in r.logs, r
        line = [x for x in r.logs.splitlines() if x.startswith("VISIBLE")][-1].split()
        assert line[1] != "None" and line[2] == "1", line  # exactly the leased GPU
anyio.run(main)
PY
# (no VRAM cap is implemented in LocalSandbox; nothing to check for it)

# 5. a tiny Llama on disk (word-level tokenizer) for the QLoRA and vLLM checks
TINY=$(mktemp -d)
"$PY" - "$TINY" <<'PY' || echo "FAIL tiny-llama: could not write the model"
import sys
from pathlib import Path
import tokenizers, torch, transformers
out = Path(sys.argv[1]) / "model"
vocab = ["<pad>", "<eos>", "<unk>", *[str(d) for d in range(10)]]
raw = tokenizers.Tokenizer(tokenizers.models.WordLevel(
    vocab={w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
raw.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
tok = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>",
                                           eos_token="<eos>", unk_token="<unk>")
tok.chat_template = ("{% for m in messages %}{{ m['role'] }} {% endfor %}"
                     "{% if add_generation_prompt %}1 2 3 {% endif %}")
cfg = transformers.LlamaConfig(vocab_size=len(vocab), hidden_size=128, intermediate_size=256,
    num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
    max_position_embeddings=2048, pad_token_id=0, eos_token_id=1, bos_token_id=1)
torch.manual_seed(0)
transformers.LlamaForCausalLM(cfg).save_pretrained(out)
tok.save_pretrained(out)
PY
has() { "$PY" -c "import $1" 2>/dev/null; }
# 6. QLoRA: 4-bit NF4 weights (bitsandbytes) + LoRA adapters (peft), one GSPO step in bf16
if has bitsandbytes && has peft; then
check "qlora-gspo-step" 180 "$PY" - "$TINY/model" <<'PY'
import math, sys, torch, transformers
from openmle.train import (GSPOConfig, GSPOTrainer, LoRAConfig, RolloutBatch, apply_lora,
                           quantization_config)
m = transformers.AutoModelForCausalLM.from_pretrained(
    sys.argv[1], quantization_config=quantization_config("4bit"), device_map={"": 0})
m = apply_lora(m, LoRAConfig(r=4, quantize="4bit"))
trainable = [n for n, p in m.named_parameters() if p.requires_grad]
assert trainable and all("lora_" in n for n in trainable), trainable[:4]
t = GSPOTrainer(m, GSPOConfig(lr=1e-3, bf16=True))
b = RolloutBatch.from_sequences([[3, 4, 5]] * 4, [[6, 7, 8, 1]] * 4, [1.0, -1.0, 0.5, -0.5],
                                pad_token_id=0, rollout_logprobs=[[-2.0] * 4] * 4)
metrics = t.step(b)
assert math.isfinite(metrics["loss"]) and metrics["grad_norm"] > 0, metrics
PY
else
  echo "SKIP qlora-gspo-step: needs bitsandbytes and peft (pip install 'openmle[qlora]')"
fi
# 7. TRL GRPO with vLLM colocated, from `openmle train gspo` (engine = "trl"), LoRA adapters
if has vllm && has trl && has peft; then
mkdir -p "$TINY/task/data/public" "$TINY/task/data/private"
printf 'id,x,y\n1,1,2\n2,2,4\n3,3,6\n4,4,8\n' > "$TINY/task/data/public/train.csv"
printf 'id,x\n5,5\n6,6\n' > "$TINY/task/data/public/test.csv"
printf 'id,y\n5,0\n6,0\n' > "$TINY/task/data/public/sample_submission.csv"
printf 'id,y\n5,10\n6,12\n' > "$TINY/task/data/private/test_answer.csv"
printf 'Predict y. RMSE.\n' > "$TINY/task/data/public/description.txt"
printf 'name = "lin"\nmetric = "rmse"\n' > "$TINY/task/task.toml"
cat > "$TINY/trl.toml" <<'TOML'
model = "model"
output_dir = "out"
steps = 2
groups_per_step = 2
checkpoint_every = 1
engine = "trl"
[[tasks]]
name = "task"
timeout_s = 60
[rollout]
group_size = 4
[policy]
max_new_tokens = 8
[lora]
r = 4
target_modules = ["q_proj", "v_proj"]
[trl]
use_vllm = true
vllm_mode = "colocate"
vllm_gpu_memory_utilization = 0.2
bf16 = true
learning_rate = 1e-3
TOML
check "trl-vllm-colocate-lora" 300 "$PY" -m openmle train gspo "$TINY/trl.toml"
else
  echo "SKIP trl-vllm-colocate-lora: needs vllm, trl and peft (pip install 'openmle[trl,peft]' vllm)"
fi
# 8. the learning example on CUDA is not needed (CPU-only by design); the FSDP2 checkpoint
#    test is CPU/gloo (tests/integration/train/test_gspo_distributed.py)
rm -rf "$TINY"
echo "SUMMARY gpu-check: $fails failed"
exit $((fails > 0))
