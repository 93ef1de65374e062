"""The kernels a training runs on, as settings of the processes that train: no torch here, so that a process that
only starts a training (the server's retraining job) can set them without loading it."""

# The kernels the numeric libraries train with, each library reading its setting at its first use (so set before
# the process computes anything: run() starts train.py again with them). Left to choose by the processor, ATen,
# MKL and oneDNN take AVX-512 kernels where it has them, and their sums round otherwise: on an AMD EPYC with
# AVX-512, the LSTM, the GPT and the ViT retrained 0.19, 0.14 and 0.05 away from their stored weights, and with
# these settings bit for bit, as on a machine with AVX2 alone. (MKL_CBWR=AVX2 is no such setting: on an AMD
# processor MKL takes it as AUTO.) Every x86-64 processor since 2013 has AVX2.
KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
