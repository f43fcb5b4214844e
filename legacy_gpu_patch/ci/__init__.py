"""CI support: `lgpatch matrix` (plan a job matrix), `lgpatch ci` (run one job), `lgpatch report merge`."""
