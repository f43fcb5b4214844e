"""The work tree as a git ledger: one commit per step, plan/rewind, the step kinds, unified-diff hunks."""
