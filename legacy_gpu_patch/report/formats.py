"""The report formats, in a module of their own so that a command's options can list them without importing the
classifier (`lgpatch build --help` stays fast). reports.emit renders them; reports re-exports FORMATS."""

from __future__ import annotations

# text: the human summary; json, junit (XML) and github (workflow annotations) are written to stdout.
FORMATS = ("text", "json", "junit", "github")
