#!/usr/bin/env bash
# Installs the Debian packages the tests (default) or the demo (`system-deps.sh demo`) use, when
# missing. Needs root (CI is); otherwise prints the apt-get line to run.
set -euo pipefail

# The demo only generates phantom series; the tests also decode, convert, train and drive a browser.
DEMO_PACKAGES=(python3-pydicom python3-numpy)
TEST_PACKAGES=(
  python3-pydicom python3-numpy python3-gdcm python3-pil   # reference DICOM decoding
  dcmtk libgdcm-tools dicom3tools                          # making and validating test files
  python3-nibabel                                          # its scanner test files (Philips Enhanced MR)
  python3-torch python3-onnx                               # training the bundled model
  chromium                                                 # UI tests (playwright-core drives it)
  postgresql                                               # throwaway clusters (test/helpers/postgres-cluster.ts), not its own service
  faketime                                                 # workstation clocks off by minutes and days (test/sync)
  orthanc orthanc-dicomweb                                 # a real PACS peer for DICOM networking and DICOMweb (test/dicom-net)
)

if [ "${1:-test}" = demo ]; then PACKAGES=("${DEMO_PACKAGES[@]}"); else PACKAGES=("${TEST_PACKAGES[@]}"); fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}" >&2
  echo "run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
