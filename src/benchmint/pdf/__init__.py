"""PDF side: page triage, geometry of figure boxes, crops."""
