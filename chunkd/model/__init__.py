"""The chunk record, the errors and the ids every layer shares."""
