# Facebook Hadoop cluster flow sizes (Roy et al., "Inside the Social Network's (Datacenter)
# Network", SIGCOMM 2015), in the form the HPCC simulations (SIGCOMM 2019) use.
# Bytes, cumulative percent. Most flows are below 1 KB.
0         0
100       1
200       2
300       5
350       15
400       20
500       30
600       40
700       50
1000      60
2000      67
7000      70
30000     72
50000     82
80000     87
120000    90
300000    95
1000000   97.5
2000000   99
10000000  100
