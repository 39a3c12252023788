"""The cluster as it was: nodes and their pools, groups and flavors over time
(``projection``), and which pod occupied what, where, when (``occupancy``)."""
