"""The solvability stage's baseline programs, as real modules read as text (nothing imports them).

Each file is the whole program a baseline job runs as its ``main.py`` in the sandbox
(:func:`openmle.builder._solvability.baseline_program` reads it with
:func:`openmle._embedded.source` and fills its slot): ``constant.py`` copies the sample
submission; ``gradient_boosting.py`` fits scikit-learn's histogram gradient boosting, its task
facts (id and target columns, metric, ``k``, task type) passed as a JSON literal in the slot
line of its last call. They import nothing of openmle: the sandbox may not have it.
"""
