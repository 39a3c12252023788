"""Configuration and service wiring: settings, embedded PostgreSQL and broker, replay and demo."""
