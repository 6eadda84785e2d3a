package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/testserver"
)

// Cluster is a Redis Cluster this package started: masters only, each a
// Server of its own, with the 16384 hash slots shared out among them.
type Cluster struct {
	nodes []*Server
}

// clusterTimeout bounds the creation of a cluster, from the first node's
// start to cluster_state:ok on every node.
const clusterTimeout = 60 * time.Second

// StartCluster starts a private cluster of masters nodes (at least 3) for
// tb, removed when tb ends. When redis-server or redis-cli is missing, tb
// is skipped, or fails under CI=true or TEST_REQUIRE_SERVERS=1.
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	c, err := LaunchCluster(masters)
	if err != nil {
		giveUp(tb, err)
		return nil
	}
	testserver.CloseOnSignal(c)
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("redistest: %v", err)
		}
		testserver.ForgetOnSignal(c)
	})
	return c
}

// LaunchCluster starts masters cluster-enabled servers (at least 3, as
// redis-cli demands) on free ports, joins them into a cluster with
// redis-cli --cluster create, and returns once every node reports
// cluster_state:ok. The caller must Close it. The error wraps
// ErrUnavailable when redis-server or redis-cli is missing.
func LaunchCluster(masters int) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, not %d", masters)
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	if bin.cli == "" {
		return nil, fmt.Errorf("%w: redis-cli, needed to create a cluster, is not installed", ErrUnavailable)
	}
	c := &Cluster{}
	for range masters {
		node, err := launch(freeClusterPort, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
		})
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, node)
	}
	if err := c.create(bin.cli); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// create joins the nodes and waits for the cluster to be whole.
func (c *Cluster) create(cli string) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, node := range c.nodes {
		for {
			info, err := command(node.Addr(), "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("redistest: node %s not in a working cluster after %v: %v\n%s", node.Addr(), clusterTimeout, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// Addrs are the nodes' host:port addresses, for redis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes are the cluster's servers, in the order of Addrs, for fault tests
// that stop, kill or restart one of them.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}
