#!/usr/bin/env bash
# Regenerate the reference clusters in terraform/ (the Surreal paper's cluster on GKE and on EKS).
# Usage: scripts/cloudwise-reference.sh [OUT_DIR]   (default: terraform/; tests pass a temp dir)
# CLOUDWISE may name the command to run (default: cloudwise).
set -euo pipefail
out="${1:-$(cd "$(dirname "$0")/.." && pwd)/terraform}"
cw=${CLOUDWISE:-cloudwise}
$cw -C "$out/gke" init --force --no-input --provider gcp --project surreal-project \
    --region us-west1 --zone us-west1-b --name surreal --kubernetes-version 1.35 --preset surreal
$cw -C "$out/eks" init --force --no-input --provider aws --region us-west-2 \
    --name surreal --kubernetes-version 1.35 --preset surreal
