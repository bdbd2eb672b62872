# Google RPC sizes (all RPCs, 2008), as the Homa paper uses them (Montazeri et al., "Homa: A
# Receiver-Driven Low-Latency Transport Protocol Using Network Priorities", SIGCOMM 2018),
# sampled at about every power of two. Bytes, cumulative percent. Half of all RPCs are <= 256 B.
0         0
3         6.48826
32        9.73239
64        15.5271
96        28.6139
128       35.1573
146       38.8155
171       42.4737
205       46.1319
256       49.7901
296       57.6179
352       65.4457
402       70.6643
469       75.8828
512       78.4921
623       81.2878
755       83.5243
1024      86.32
1536      89.3641
2048      90.8862
4096      93.4955
8192      96.4309
16384     98.4694
32768     99.0402
65536     99.3256
131072    99.7129
262144    99.8453
524288    99.9498
1008790   99.9748
2034108   99.9884
4135977   99.9952
8231141   99.9985
15158197  100
