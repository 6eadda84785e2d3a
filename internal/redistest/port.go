package redistest

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
)

// clusterBusOffset is how far above its port a cluster node listens for the
// other nodes.
const clusterBusOffset = 10000

// freeClusterPort finds a port that is free, together with the port
// clusterBusOffset above it. It draws from 20000-29999, below the kernel's
// usual ephemeral range, so that the bus port stays a valid port too.
func freeClusterPort() (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(10000)
		if canListen(port) && canListen(port+clusterBusOffset) {
			return port, nil
		}
	}
	return 0, errors.New("redistest: no free pair of cluster ports in 20000-39999")
}

func canListen(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
