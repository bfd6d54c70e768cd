#!/usr/bin/env bash
# Fetches a newer HIP userland for gpu-mem-roc's compile tests: Debian 13's HIP 5.7.1 (hiprtc in
# libamdhip64.so.5, comgr 6.0 on LLVM 17), which compiles for gfx11 (RDNA3). Debian 12's hiprtc
# (ROCm 5.2.3, comgr 2.4) knows ISAs up to gfx1036 only, and Debian 13's libraries need a newer
# C and C++ runtime (glibc 2.38+, libstdc++ 14) than Debian 12's, so they cannot be loaded into a
# process of this system. They come with that runtime instead: the packages and their
# dependencies are downloaded by apt-get into private directories (nothing is installed into the
# system; no root needed) and unpacked into
#
#     ${CARGO_TARGET_DIR:-target}/hip-userland/root
#
# where `tests/native` (gpu-mem-roc) finds them: for an ISA the system's comgr does not list, the
# test binary runs again under that root's dynamic loader and compiles there, through the same
# code (see crates/gpu-mem-roc/tests/native/newer_hip.rs).
#
# Idempotent: a complete unpacked root (its `versions` file is written last) is kept. Prints the
# unpacked versions. Without the registry (offline) or apt it warns and leaves nothing behind,
# and the tests report those trials as skipped with the reason.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
mkdir -p "$target_dir"
dest="$(cd "$target_dir" && pwd)/hip-userland"
suite=trixie
packages=(libamdhip64-5 libhiprtc-builtins5 libamd-comgr2)

loader="$dest/root/usr/lib64/ld-linux-x86-64.so.2"
if [ -f "$dest/versions" ] && [ -x "$loader" ] \
    && [ -e "$dest/root/usr/lib/x86_64-linux-gnu/libamdhip64.so.5" ]; then
    echo "fetch-hip-userland: already in $dest"
    sed 's/^/  /' "$dest/versions"
    exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
    echo "fetch-hip-userland: only for x86-64 (this is $(uname -m)); the tests skip without it"
    exit 0
fi

work="$dest/apt"
rm -rf "$dest"
mkdir -p "$work/state/lists/partial" "$work/cache/archives/partial" "$dest/root"
touch "$work/state/status"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$work/sources.list" <<EOF
deb [signed-by=$keyring] http://deb.debian.org/debian $suite main
deb [signed-by=$keyring] http://deb.debian.org/debian $suite-updates main
deb [signed-by=$keyring] http://deb.debian.org/debian-security $suite-security main
EOF
# An empty dpkg status: apt resolves the packages' whole dependency closure, the C library
# included, and downloads it without touching the system's package state.
apt_opts=(
    -o "Dir::Etc::SourceList=$work/sources.list"
    -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State=$work/state"
    -o "Dir::State::status=$work/state/status"
    -o "Dir::Cache=$work/cache"
    -o APT::Architecture=amd64
    -o APT::Install-Recommends=false
    -o Debug::NoLocking=true
    -o APT::Sandbox::User=root
)
give_up() {
    echo "fetch-hip-userland: warning: $1; the gfx11 and newer-userland trials will be skipped" >&2
    rm -rf "$dest"
    exit 0
}
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || give_up "no apt-get / dpkg-deb"
echo "fetch-hip-userland: downloading ${packages[*]} from Debian $suite"
apt-get "${apt_opts[@]}" -qq update </dev/null || give_up "apt-get update failed (offline?)"
apt-get "${apt_opts[@]}" -qq install -y --download-only "${packages[@]}" </dev/null >/dev/null \
    || give_up "downloading the packages failed"
versions="$work/versions"
for deb in "$work"/cache/archives/*.deb; do
    dpkg-deb -x "$deb" "$dest/root" || give_up "unpacking $(basename "$deb") failed"
    dpkg-deb -f "$deb" Package Version | paste -sd= | sed 's/Package: //; s/=Version: /=/' >>"$versions"
done
# The loader must be the unpacked one (an absolute link would lead back to the system's).
case "$(readlink -f "$loader" 2>/dev/null)" in
    "$dest/root/"*) ;;
    *) give_up "no dynamic loader inside the unpacked root" ;;
esac
mv "$versions" "$dest/versions"
rm -rf "$work" "$dest/root/usr/share/doc" "$dest/root/usr/share/man" "$dest/root/usr/share/locale"
echo "fetch-hip-userland: unpacked into $dest/root ($(du -sh "$dest/root" | cut -f1)):"
sed 's/^/  /' "$dest/versions"
