//! The SLO family in one engine: its plan, rows and notes.
