"""Looking after the machine: the run registry (what a run started, so ``make stop`` can remove
it), ``make deps`` and ``make doctor``. Standard library only: ``make deps`` and ``make stop`` run
under the system Python before the venv exists."""
