# Sourced on a lent GPU machine (tool `device`) from the repo root, after
# the parts of scripts/device/make_payload.sh were moved to /tmp/chunks (one
# call each, carry [".gpu/p0N"], command `mkdir -p /tmp/chunks && mv
# .gpu/p0? /tmp/chunks/`: the repo's copy there is replaced at every call,
# /tmp stays while the machine is warm, i.e. at most 30 s between calls).
# Unpacks the packages into /tmp/site once, points TF's CUDA 12 sonames at
# the image's CUDA 13 libraries (cuBLAS, cuDNN, cuFFT, cuSOLVER, cuSPARSE;
# cudart and CUPTI 12 are carried) and exports PYTHONPATH and
# LD_LIBRARY_PATH. Then e.g. `python3 scripts/gpu_steps.py`.
T0=$(date +%s)
mkdir -p /tmp/site /tmp/cu12
if [ ! -f /tmp/site/.done ]; then
  cat /tmp/chunks/p0? | xz -d -T0 | tar x -C /tmp/site && touch /tmp/site/.done
fi
echo "site: $(ls /tmp/site | wc -l) entries, $(( $(date +%s) - T0 )) s"
dirs=""
pick() { find /opt /usr /lib -name "$1" -not -path "/tmp/*" 2>/dev/null | sort -V | tail -1; }
for pair in libcublas.so.12:'libcublas.so.1[3-9]' libcublasLt.so.12:'libcublasLt.so.1[3-9]' \
    libcufft.so.11:'libcufft.so.1[2-9]' libcusolver.so.11:'libcusolver.so.1[2-9]' \
    libcusparse.so.12:'libcusparse.so.1[2-9]' libcudnn.so.9:'libcudnn.so.9' \
    x:'libnvJitLink.so.1[3-9]' x:'libnvrtc.so.1[3-9]' x:'libcudnn_graph.so.9'; do
  want=${pair%%:*}; src=$(pick "${pair#*:}")
  echo "$want -> $src"
  [ -n "$src" ] || continue
  [ "$want" = x ] || ln -sf "$src" /tmp/cu12/$want
  dirs="$dirs:$(dirname "$src")"
done
export LD_LIBRARY_PATH=/tmp/cu12$dirs:/tmp/site/nvidia/cuda_runtime/lib:/tmp/site/nvidia/cuda_cupti/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
