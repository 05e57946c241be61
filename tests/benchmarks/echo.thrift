// The thriftpy2 peer of the RPC benchmarks (tests/benchmarks/_rpc_peers.py):
// echo(value) as the other peers answer it.  Thrift has no "any" type, so,
// as AMP has one command per payload type, there is one method per payload:
// the int 42 and 1 KiB of bytes.

service Echo {
    i64 echoInt(1: i64 value)
    binary echoBytes(1: binary value)
}
