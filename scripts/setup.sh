#!/usr/bin/env bash
# Installs the Debian packages that the build, the tests and the tools need; skips what is there.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libutf8proc-dev nlohmann-json3-dev libsimdjson-dev libcli11-dev
  libcpp-httplib-dev
  python3 python3-numpy python3-jinja2 curl ca-certificates xz-utils
  tmux
  clang-14 libclang-rt-14-dev
  chromium
)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
# npm fetches the tokenizer; a Node.js that ships its own npm (e.g. nodesource's) is fine.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
# A fresh machine often runs an apt process of its own at boot: wait for its locks, not fail.
# apt-get install waits through DPkg::Lock::Timeout; apt-get update does not, so it is retried.
lock_wait_s=${FORNACE_APT_LOCK_TIMEOUT:-900}
poll_s=${FORNACE_APT_LOCK_POLL:-5}
apt_get=("${sudo_cmd[@]}" apt-get -o "DPkg::Lock::Timeout=$lock_wait_s")
waited_s=0
until update_log=$("${apt_get[@]}" update -qq 2>&1); do
  if ! grep -q "lock" <<<"$update_log" || [ "$waited_s" -ge "$lock_wait_s" ]; then
    echo "$update_log" >&2
    echo "error: setup: apt-get update failed" >&2
    exit 1
  fi
  [ "$waited_s" -gt 0 ] || echo "setup: another apt process holds the package lists; waiting up to ${lock_wait_s} s"
  sleep "$poll_s"
  waited_s=$((waited_s + poll_s))
done
if ! "${apt_get[@]}" install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "error: setup: apt-get install ${missing[*]} failed" >&2
  exit 1
fi
