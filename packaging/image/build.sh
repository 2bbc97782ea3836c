#!/usr/bin/env bash
# Builds proctor's OCI image from scratch with buildah, without a registry: the release binary
# and the shared libraries `ldd` names for it (the C library, libgcc_s, the loader), an
# /etc/passwd with root and nobody, and an empty /tmp. Nothing else: no shell, no package
# manager. The entrypoint is proctor; the default command serves the host mounted at /host on
# 0.0.0.0:9465 with the token from /run/secrets/proctor-token, recording into /var/lib/proctor.
#
#   packaging/image/build.sh [BINARY] [NAME]     (defaults: target/release/proctor, localhost/proctor:latest)
#
# BUILDAH_ARGS adds global buildah options (for example a separate --root and --storage-driver).
# Run it as podman/docker would run a node agent:
#   podman run -d --pid=host -v /:/host:ro,rslave -p 9465:9465 localhost/proctor
set -euo pipefail
bin=${1:-target/release/proctor}
name=${2:-localhost/proctor:latest}
read -r -a extra <<<"${BUILDAH_ARGS:-}"
b() { buildah "${extra[@]}" "$@"; }

[[ -x $bin ]] || { echo "build.sh: $bin is not an executable (cargo build --release --bin proctor)" >&2; exit 2; }
staging=$(mktemp -d)
ctr=""
cleanup() {
  [[ -n $ctr ]] && b rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$staging"
}
trap cleanup EXIT

mkdir -p "$staging/usr/bin" "$staging/etc" "$staging/tmp" "$staging/var/lib/proctor"
chmod 1777 "$staging/tmp"
install -m 0755 "$bin" "$staging/usr/bin/proctor"
# The release profile keeps line tables for backtraces on the host; the image does without.
if command -v strip >/dev/null; then
  strip --strip-debug "$staging/usr/bin/proctor"
fi
# Every library the dynamic loader would map, at the path it maps it from, and the loader.
ldd "$bin" | grep -o '/[^ ]*' | sort -u | while read -r lib; do
  mkdir -p "$staging$(dirname "$lib")"
  cp -L "$lib" "$staging$lib"
done
printf 'root:x:0:0:root:/:/usr/bin/proctor\nnobody:x:65534:65534:nobody:/:/usr/bin/proctor\n' >"$staging/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$staging/etc/group"

ctr=$(b from scratch)
b copy "$ctr" "$staging/" / >/dev/null
b config \
  --entrypoint '["/usr/bin/proctor"]' \
  --cmd '["serve", "--host-root", "/host", "--listen", "0.0.0.0:9465", "--token-file", "/run/secrets/proctor-token", "--data-dir", "/var/lib/proctor"]' \
  --port 9465/tcp \
  --env XDG_STATE_HOME=/var/lib \
  --label org.opencontainers.image.title=proctor \
  --label "org.opencontainers.image.description=A Linux monitor that never becomes the load" \
  "$ctr"
b commit -q "$ctr" "$name" >/dev/null
echo "built $name from $bin ($(du -sh "$staging" | cut -f1) of files)"
