package pgtest

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// serverUser is the OS user a server runs as when the test process is root,
// since PostgreSQL refuses to run as root.
const serverUser = "postgres"

// owner is who a server's programs run as: nil credentials mean the current
// user, otherwise those of serverUser.
type owner struct {
	cred *syscall.Credential
}

// findOwner picks the user to run the server as.
func findOwner() (owner, error) {
	if os.Geteuid() != 0 {
		return owner{}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return owner{}, fmt.Errorf("%w: running as root and PostgreSQL refuses root, but there is no %q user to run it as (%v)", ErrUnavailable, serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return owner{}, fmt.Errorf("pgtest: uid of %q: %w", serverUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return owner{}, fmt.Errorf("pgtest: gid of %q: %w", serverUser, err)
	}
	return owner{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}, nil
}

// give hands path over to the owner, so the server can write in it.
func (o owner) give(path string) error {
	if o.cred == nil {
		return nil
	}
	return os.Chown(path, int(o.cred.Uid), int(o.cred.Gid))
}

// attr is how a server process starts: as the owner, in a process group of
// its own, so that a terminal's interrupt reaches only the test process,
// which then stops the server cleanly, and with deathSignal sent to it
// should the process that started it die.
func (o owner) attr(deathSignal syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Credential: o.cred,
		Setpgid:    true,
		Pdeathsig:  deathSignal,
	}
}
