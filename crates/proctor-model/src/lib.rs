//! proctor-model: see ARCHITECTURE.md.
