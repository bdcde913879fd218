#!/usr/bin/env bash
# Fetches a training corpus that this repository does not redistribute into data/ (git-ignored), checked by SHA-256:
#   bash bench/fetch-corpus.sh gcide    data/gcide.dict.dz (13.5 MB; 40 MB of text): GCIDE 0.48, the GNU Collaborative
#                                       International Dictionary of English, from Debian's dict-gcide 0.48.5+nmu2
#                                       (GPL-2+), and its copyright file as data/gcide.copyright
# then: ./taco train --data data/gcide.dict.dz (--data reads dictd's gzip-compatible .dict.dz directly).
# The package comes from Debian's archive: apt-get download where apt has that version, else its file in the archive's
# pool (curl or wget). Only the .dict.dz and the copyright file are unpacked from it. A file already there whose
# SHA-256 matches is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  gcide)
    pkg=dict-gcide version=0.48.5+nmu2 pool=d/dict-gcide
    deb_sha256=7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f
    member=./usr/share/dictd/gcide.dict.dz
    sha256=3e6b2cdcbc1b3664c2f1466e3c8e44012e815c4c67fa83fa61f39777cd6e8517 ;;
  -h|--help) sed -n '2,9p' "$0" | cut -c3-; exit 0 ;;
  "") echo "fetch-corpus: name the corpus: bash bench/fetch-corpus.sh gcide" >&2; exit 2 ;;
  *) echo "fetch-corpus: unknown corpus '$1': the corpora are gcide (bash bench/fetch-corpus.sh gcide)" >&2; exit 2 ;;
esac
out="data/${member##*/}"
if [ -f "$out" ] && echo "$sha256  $out" | sha256sum --check --status; then
  echo "$out is there (SHA-256 checked)"
  exit 0
fi
mkdir -p data
tmp=$(mktemp -d data/.fetch.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
deb="${pkg}_${version}_all.deb"
url="https://deb.debian.org/debian/pool/main/$pool/$deb"
if command -v apt-get >/dev/null && (cd "$tmp" && apt-get download -q "$pkg=$version") >/dev/null 2>&1; then
  echo "fetched $deb with apt-get download"
elif command -v curl >/dev/null; then
  curl -fsSL --retry 3 -o "$tmp/$deb" "$url" && echo "fetched $url"
else
  wget -q -O "$tmp/$deb" "$url" && echo "fetched $url"
fi
echo "$deb_sha256  $tmp/$deb" | sha256sum --check --status \
  || { echo "fetch-corpus: $deb does not have the SHA-256 $deb_sha256: not used" >&2; exit 1; }
copyright="./usr/share/doc/$pkg/copyright"
# a .deb is an ar archive whose data.tar.xz holds the files; dpkg-deb reads it where there is one
if command -v dpkg-deb >/dev/null; then
  dpkg-deb --fsys-tarfile "$tmp/$deb" | tar -x -C "$tmp" "$member" "$copyright"
else
  (cd "$tmp" && ar x "$deb" data.tar.xz) && tar -xJf "$tmp/data.tar.xz" -C "$tmp" "$member" "$copyright"
fi
echo "$sha256  $tmp/$member" | sha256sum --check --status \
  || { echo "fetch-corpus: $member in $deb does not have the SHA-256 $sha256: not used" >&2; exit 1; }
mv -f "$tmp/$copyright" "data/${1}.copyright"
mv -f "$tmp/$member" "$out"
echo "$out: $(stat -c %s "$out") bytes, SHA-256 checked; licence: data/${1}.copyright"
