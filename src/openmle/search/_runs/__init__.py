"""The runs layer: what reads finished (or running) run directories, on top of the search core.

- :mod:`.export`: the nodes of a run as a table (``export_run``, ``openmle export``);
- :mod:`.report`: the HTML report of a run (``write_report``, ``openmle report``);
- :mod:`.sft_export`: supervised fine-tuning records from runs (``export_sft``, ...).

These modules import the core (``_loop``, ``_prompts``, ``_rundir``); no core module imports
them (``tests/test_import_graph.py`` checks it). Public names are re-exported by
:mod:`openmle.search`.
"""
