"""The torch training backend: GSPO and SFT trainers, a tiny causal LM and tokenisers.

Private package: the public names are re-exported lazily from :mod:`openmle.backends`. Importing
it needs the ``torch`` extra (``pip install 'openmle[torch]'``).
"""

from __future__ import annotations

from openmle._compat import require

require("torch", "torch")
