//! proctor-procfs: see ARCHITECTURE.md.
