"""The offline model's programs, as real modules read as text (nothing imports them).

``tabular.py`` is the template of every tabular program that
:func:`~openmle.backends._offline.render_program` writes, ``tabular_parts.py`` holds the parts
it fills in, and ``builder_prepare.py`` is the task builder's ``prepare.py`` (see
:mod:`openmle._embedded` for the slot and part markers).
"""
