"""Reading a chapter's exercises (moved to :mod:`mixlib.exercise._cells`, which ``make grade`` uses too)."""

from mixlib.exercise._cells import (ANSWER_LINE, CHECK_HEADER, CODE_BLOCK, SOLUTION, check_call, check_cells, own_names, solutions,
                                     with_self_tests, with_solutions)

__all__ = ["ANSWER_LINE", "CHECK_HEADER", "CODE_BLOCK", "SOLUTION", "check_call", "check_cells", "own_names", "solutions", "with_self_tests", "with_solutions"]
