#!/bin/bash
# On the GPU machine (device tool, kind nvidia-h200): the captures of rules.py, each scenario in a
# fresh process, plus an `nvidia-smi -q -x` snapshot of the machine; results packed into $OUT.
set -u
G=$(cd "$(dirname "$0")" && pwd)
O=/tmp/rules; mkdir -p $O
nvidia-smi -L; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'
nvidia-smi -q -x > $O/h200_rules_machine.smi.xml
T0=$(date +%s)
for s in fp32_no_tf32 fp32_tf32_clean bf16_odd_dims softmax_few_rows small_mlp_launch_bound \
         adam_single_tensor adam_fused_clean leak_losses near_oom checkpoint_step; do
  PYTHONUNBUFFERED=1 timeout 150 python3 "$G/rules.py" $O "$s" --gpu 0 2>&1 | grep -v Warning | tail -3
done
echo "done in $(( $(date +%s) - T0 )) s"
ls -la $O
( cd $O && tar czf - . | split -b 15000000 -d - $OUT/rules.tgz.part )
