# Web search flow sizes, measured for DCTCP (Alizadeh et al., "Data Center TCP (DCTCP)",
# SIGCOMM 2010), in the piecewise-linear form the pFabric (SIGCOMM 2013) and HPCC (SIGCOMM 2019)
# simulations use. Bytes, cumulative percent. Mean about 1.6 MB; most bytes are in flows > 1 MB.
0         0
10000     15
20000     20
30000     30
50000     40
80000     53
200000    60
1000000   70
2000000   80
5000000   90
10000000  97
30000000  100
