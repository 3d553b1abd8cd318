"""The program's name, as every message and report names it (argparse's ``prog``, SARIF's ``tool.driver.name``).

A module of its own so that the entry point, which must start fast, and the reporters share it without importing
anything else. Imports: nothing.
"""

PROG = "pbp-serialize"
