# Sourced by the bench scripts, from the repository root: PROCTOR_BIN is the proctor to measure,
# a release build of this checkout unless the caller named another (then nothing is built).
if [[ -z ${PROCTOR_BIN:-} ]]; then
  cargo build --release --locked --bin proctor 2>&1 | tail -1
  PROCTOR_BIN=$(realpath "${CARGO_TARGET_DIR:-target}/release/proctor")
fi
export PROCTOR_BIN
