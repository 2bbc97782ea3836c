# Sourced by scripts/test.sh and the parts in scripts/test.d/: the suite's builds, so that each
# kind is compiled once and every part uses the same artifacts.
#
# - The dev build is `cargo test --workspace --no-run` with clippy-driver as the workspace's
#   compiler (RUSTC_WORKSPACE_WRAPPER, CLIPPY_ARGS: what `cargo clippy` itself sets): one
#   compile lints every target of the workspace with `-D warnings` and builds the tests, the
#   binaries and the examples. Dependencies are not linted and not compiled twice.
# - Every later cargo call of the suite goes through `dev_cargo` with the same environment and
#   `--workspace`, so it finds that build fresh: a `-p CRATE` or a plain `cargo build` would
#   resolve other features (or another compiler) and build again.
# - `release_build` makes the one release build: the proctor binary, and the Python wheel built
#   by maturin from the same target directory (`target/wheels`), for the package, the image
#   and the Python parts.

target_dir="${CARGO_TARGET_DIR:-target}"
dev_dir="$target_dir/debug"
proctor_dev="$dev_dir/proctor"
proctor_release="$target_dir/release/proctor"
wheel_dir="$target_dir/wheels"

# clippy-driver from the toolchain cargo runs, or nothing (then the dev build is a plain one and
# scripts/test.sh says lints were NOT checked).
clippy_driver() {
  local driver
  driver="$(rustc --print sysroot 2>/dev/null)/bin/clippy-driver"
  if [[ -x $driver ]] && "$driver" --version >/dev/null 2>&1; then
    echo "$driver"
  fi
}

# cargo with the dev build's environment (see above).
dev_cargo() {
  local driver
  driver=$(clippy_driver)
  if [[ -n $driver ]]; then
    RUSTC_WORKSPACE_WRAPPER="$driver" CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" cargo "$@"
  else
    cargo "$@"
  fi
}

# The dev build (lint + compile). Writes the test binaries' paths to $target_dir/test-binaries.tsv
# (package, target name, path) for `test_binary`.
dev_build() {
  local messages="$target_dir/dev-build.json"
  mkdir -p "$target_dir"
  dev_cargo test --workspace --locked --no-run --quiet --message-format=json-diagnostic-rendered-ansi >"$messages"
  local status=$?
  # Diagnostics (warnings, clippy's lints, errors) as cargo would print them.
  python3 - "$messages" "$target_dir/test-binaries.tsv" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-message":
        rendered = m["message"].get("rendered")
        if rendered:
            sys.stderr.write(rendered)
    elif m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        package = m["package_id"].split("#")[0].rsplit("/", 1)[-1]
        rows.append((package, m["target"]["name"], m["executable"]))
    elif m.get("reason") == "build-finished":
        print(f"dev build: {'finished' if m['success'] else 'FAILED'}; {len(rows)} test binaries")
with open(sys.argv[2], "w") as out:
    for row in rows:
        out.write("\t".join(row) + "\n")
PY
  return $status
}

# The dev build, unless scripts/test.sh already made it for this run (PROCTOR_DEV_BUILT): a
# part run alone builds first, so it never runs binaries older than the source.
ensure_dev_build() {
  [[ -n ${PROCTOR_DEV_BUILT:-} && -s $target_dir/test-binaries.tsv ]] || dev_build >&2
}

# test_binary PACKAGE TARGET: the dev build's test binary (TARGET `it` is tests/it, the package's
# lib name its unit tests).
test_binary() {
  ensure_dev_build || return 1
  awk -F'\t' -v p="$1" -v t="$2" '$1 == p && $2 == t { print $3; exit }' "$target_dir/test-binaries.tsv"
}

# run_tests PACKAGE TARGET [ARGS...]: runs a dev-build test binary from its package's directory
# (as cargo test does), with the test harness's ARGS (filters, --exact, --nocapture).
run_tests() {
  local package=$1 target=$2 bin
  shift 2
  bin=$(test_binary "$package" "$target") || return 1
  [[ -n $bin ]] || { echo "FAIL: no test binary $target in $package (see $target_dir/test-binaries.tsv)"; return 1; }
  bin=$(realpath "$bin")
  (cd "crates/$package" && "$bin" "$@")
}

# The dev build's proctor (built first when a part runs alone).
ensure_dev_proctor() {
  ensure_dev_build
}

# The release build: proctor, then the wheel from the same target directory, the way a user's
# `pip install .` builds it (pip runs maturin, which compiles proctor-py with cargo's release
# profile in this target directory, reusing what the binary's build compiled). PYTHON is a
# Python with pip and maturin (the suite's .venv); without one the wheel is not built, and that
# is said.
release_build() {
  local python=${1:-.venv/bin/python}
  cargo build --release --locked --bin proctor || return 1
  if [[ -x $python ]] && "$python" -c 'import maturin' 2>/dev/null; then
    rm -rf "$wheel_dir"
    # Without build isolation pip runs the venv's maturin, which must be on PATH; -v shows
    # what cargo compiled.
    PATH="$(dirname "$python"):$PATH" "$python" -m pip wheel -v --no-build-isolation --no-deps -w "$wheel_dir" . \
      >"$target_dir/pip-wheel.log" 2>&1 || { tail -20 "$target_dir/pip-wheel.log"; return 1; }
    echo "wheel: $(built_wheel)"
    # Only the extension and PyO3 should be new; anything else was compiled a second time.
    local again
    again=$(grep -oE 'Compiling [A-Za-z0-9_-]+' "$target_dir/pip-wheel.log" | awk '{print $2}' | sort -u \
      | grep -vxE 'proctor-py|pyo3.*|target-lexicon' | tr '\n' ' ')
    if [[ -n $again ]]; then
      echo "WARNING: the wheel's build compiled again what the binary's build had: $again(proctor-py's graph asks for other features; see crates/proctor-py/Cargo.toml)"
    else
      echo "the wheel's build compiled only proctor-py and PyO3 ($(grep -cE 'Compiling ' "$target_dir/pip-wheel.log") crates); the rest is the binary's build"
    fi
  else
    echo "release build: no maturin in $python: the wheel is NOT built"
  fi
}

# pip_install_wheel PYTHON: installs the release build's wheel into PYTHON's environment (making
# it first when this part runs alone). Prints why not and returns 1 when there is none.
pip_install_wheel() {
  local python=$1 wheel
  wheel=$(built_wheel)
  if [[ -z $wheel ]]; then
    echo "-- no wheel yet (this part was run alone): the release build"
    release_build "$python" >&2 || return 1
    wheel=$(built_wheel)
    [[ -n $wheel ]] || return 1
  fi
  "$python" -m pip install --quiet --force-reinstall --no-deps "$wheel"
}

# The wheel release_build made (empty when there is none).
built_wheel() {
  # Nothing (and success) when there is none: callers test for an empty answer, under set -e
  # and pipefail.
  ls "$wheel_dir"/proctor-*.whl 2>/dev/null | head -1 || true
}
