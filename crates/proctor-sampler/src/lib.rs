//! proctor-sampler: see ARCHITECTURE.md.
