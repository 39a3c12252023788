"""Everything that consumes or feeds a stream: watchers, Kafka pipeline, projectors, dispatcher."""
