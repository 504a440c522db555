#!/usr/bin/env bash
# Short name of this machine for bench/results/<machine>/ (see shared RESULTS.md):
# h100 / h200 / h200x2 ... when NVIDIA GPUs are visible, else cpu<N> with N cores. Where
# CUDA_VISIBLE_DEVICES names fewer GPUs than the machine has (two of four, say), the count is
# that of the GPUs the programs see, so that the results are filed under what ran.
set -u
if command -v nvidia-smi >/dev/null 2>&1; then
  names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true)
  count=$(printf '%s\n' "$names" | grep -c . || true)
  if [[ "$count" -gt 0 ]]; then
    model=$(printf '%s\n' "$names" | head -n1 | grep -oiE 'h100|h200|a100|l40s|gh200' | head -n1 | tr 'A-Z' 'a-z')
    [[ -n "$model" ]] || model=gpu
    if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
      visible=$(printf '%s\n' "${CUDA_VISIBLE_DEVICES//,/$'\n'}" | grep -c .)
      [[ "$visible" -lt "$count" ]] && count=$visible
    fi
    if [[ "$count" -gt 1 ]]; then echo "${model}x${count}"; else echo "$model"; fi
    exit 0
  fi
fi
echo "cpu$(nproc)"
