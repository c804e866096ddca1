"""MLE-bench's competition splits and known issues (data, with sources).

``LITE_IDS`` is MLE-bench's ``experiments/splits/low.txt`` (the 22 "Lite" competitions) at
commit 783b15a of https://github.com/openai/mle-bench (MIT). ``KNOWN_ISSUES`` paraphrases the
"Known Issues" section of that repository's README at the same commit.
"""

from __future__ import annotations

__all__ = [
    "KNOWN_ISSUES",
    "LITE_IDS",
    "MODALITIES",
    "MODALITY_LABELS",
    "SUITES",
    "SUITE_FILES",
    "modality_of",
]

LITE_IDS: tuple[str, ...] = (
    "aerial-cactus-identification",
    "aptos2019-blindness-detection",
    "denoising-dirty-documents",
    "detecting-insults-in-social-commentary",
    "dog-breed-identification",
    "dogs-vs-cats-redux-kernels-edition",
    "histopathologic-cancer-detection",
    "jigsaw-toxic-comment-classification-challenge",
    "leaf-classification",
    "mlsp-2013-birds",
    "new-york-city-taxi-fare-prediction",
    "nomad2018-predict-transparent-conductors",
    "plant-pathology-2020-fgvc7",
    "random-acts-of-pizza",
    "ranzcr-clip-catheter-line-classification",
    "siim-isic-melanoma-classification",
    "spooky-author-identification",
    "tabular-playground-series-dec-2021",
    "tabular-playground-series-may-2022",
    "text-normalization-challenge-english-language",
    "text-normalization-challenge-russian-language",
    "the-icml-2013-whale-challenge-right-whale-redux",
)

SUITE_FILES: dict[str, str] = {
    "mle-bench-lite": "low.txt",
    "mle-bench-medium": "medium.txt",
    "mle-bench-high": "high.txt",
}
"""Suite name -> the split file under the registry's ``experiments/splits``."""

SUITES: tuple[str, ...] = ("mle-bench-lite", "mle-bench-medium", "mle-bench-high", "mle-bench-all")

KNOWN_ISSUES: dict[str, str] = {
    "tensorflow-speech-recognition-challenge": (
        "prepare.py gives the test set too wide a label range and speakers shared with train "
        "(mle-bench#63)"
    ),
    "icecube-neutrinos-in-deep-ice": "checksums do not match (mle-bench#58)",
    "ranzcr-clip-catheter-line-classification": (
        "prepare.py leaves columns out of the sample submission (mle-bench#30)"
    ),
    "tabular-playground-series-dec-2021": "crowded leaderboard: top and median scores are close",
    "tabular-playground-series-may-2022": "crowded leaderboard: top and median scores are close",
    "jigsaw-toxic-comment-classification-challenge": (
        "crowded leaderboard: top and median scores are close"
    ),
    "champs-scalar-coupling": "test molecules missing from structures.csv (mle-bench#70)",
    "multi-modal-gesture-recognition": "public test .mat files leak the labels (mle-bench#77)",
    "smartphone-decimeter-2022": "public test span_log.nmea files leak the answer (mle-bench#93)",
    "hubmap-kidney-segmentation": "public test {image_id}.json files leak the answer",
    "random-acts-of-pizza": (
        "the field giver_username_if_known leaks the outcome; MLE-bench says to drop it "
        "(mle-bench#108)"
    ),
}
"""Competition id -> a known problem MLE-bench lists (results stay comparable: MLE-bench v1
still counts these competitions; the report flags them)."""


MODALITY_LABELS: tuple[str, ...] = ("image", "text", "audio", "tabular", "multimodal")
"""The paper's modality groups, in report order."""

MODALITIES: dict[str, str] = {
    # image (9): the prepared public data is an image folder (or image archive) + label CSV
    "aerial-cactus-identification": "image",
    "aptos2019-blindness-detection": "image",
    "denoising-dirty-documents": "image",
    "dog-breed-identification": "image",
    "dogs-vs-cats-redux-kernels-edition": "image",
    "histopathologic-cancer-detection": "image",
    "plant-pathology-2020-fgvc7": "image",
    "ranzcr-clip-catheter-line-classification": "image",
    "siim-isic-melanoma-classification": "image",
    # text (5): CSV of text fields
    "detecting-insults-in-social-commentary": "text",
    "jigsaw-toxic-comment-classification-challenge": "text",
    "spooky-author-identification": "text",
    "text-normalization-challenge-english-language": "text",
    "text-normalization-challenge-russian-language": "text",
    # audio (2): recordings (.wav / .aif clips)
    "mlsp-2013-birds": "audio",
    "the-icml-2013-whale-challenge-right-whale-redux": "audio",
    # tabular (4): numeric/categorical CSV columns only
    "new-york-city-taxi-fare-prediction": "tabular",
    "nomad2018-predict-transparent-conductors": "tabular",
    "tabular-playground-series-dec-2021": "tabular",
    "tabular-playground-series-may-2022": "tabular",
    # multimodal (2): two kinds of input the model is expected to combine
    "leaf-classification": "multimodal",  # leaf images + 192 shape/margin/texture features
    "random-acts-of-pizza": "multimodal",  # request text + requester account metadata (JSON)
}
"""The modality of each MLE-bench Lite competition (data, with its source).

The partition is the paper's (Lite: 9 image, 5 text, 2 audio, 4 tabular, 2 multimodal). Which
competition is in which group was decided from what each competition's ``prepare.py`` (MLE-bench
commit 783b15a) writes to ``prepared/public``: a competition whose public data is an image
folder with a label table is ``image`` even when the table has a few extra columns (SIIM-ISIC's
patient age, sex and site); ``multimodal`` is kept for the two whose second input is a full
feature set of its own (leaf-classification's 192 precomputed features next to the images;
random-acts-of-pizza's request text next to the requester's account statistics).
"""


def modality_of(competition_id: str) -> str | None:
    """The competition's modality (:data:`MODALITIES`), or None when it is not known."""
    return MODALITIES.get(competition_id)
