export PYTHONPATH=$PWD
timeout 280 ncu --profile-from-start off -k regex:rmsnorm_bwd --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats python3 benchmarks/probes/rmsnorm_long_rows.py --impls cuda --shapes 2048x65536 > $OUT/ncu-sections.log 2>&1; echo "ncu rc=$?"
grep -E "rmsnorm_bwd|DRAM Throughput|Memory Throughput|Duration|Stall|stall|Warp Cycles|Achieved Occupancy|Theoretical Occupancy|Cluster|Waves|Registers|Block Limit|cycles being stalled|Est" $OUT/ncu-sections.log | head -60
