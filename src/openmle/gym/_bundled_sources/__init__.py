"""The bundled tasks' ``prepare.py`` and ``metric.py``, as real modules read as text.

Nothing imports them: :mod:`openmle.gym._bundled` writes their text into each task package
(see :mod:`openmle._embedded` for the slot and part markers).
"""
