"""Reports of a build or classification: text, JSON, JUnit, GitHub annotations and step summary."""
