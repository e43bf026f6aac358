package api

import "fmt"

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleViewer, RoleWorker, RoleOperator, RoleAdmin:
		return true
	}
	return false
}

// Roles lists the roles, least to most.
func Roles() []Role { return []Role{RoleViewer, RoleWorker, RoleOperator, RoleAdmin} }

// Access is what a route requires of its caller. Roles are not a strict
// ladder (a worker may not read jobs, a viewer may not poll), so each
// level lists the roles it admits:
//
//	AccessAnonymous  anyone, with or without a credential
//	AccessRead       viewer, operator, admin
//	AccessMembers    viewer, worker, operator, admin (the member list)
//	AccessWrite      operator, admin
//	AccessWork       worker, admin (the worker protocol)
//	AccessAdmin      admin
//	AccessStatic     anyone: static files that hold no data (the console)
type Access int

// The access levels.
const (
	AccessAnonymous Access = iota
	AccessRead
	AccessMembers
	AccessWrite
	AccessWork
	AccessAdmin
	// AccessStatic is anonymous too, for static files that hold no data
	// (the console's HTML, script and style): its own level so that the
	// route table and the docs say what these routes serve.
	AccessStatic
)

// String names the level as the docs do.
func (a Access) String() string {
	switch a {
	case AccessAnonymous:
		return "anonymous"
	case AccessRead:
		return "read"
	case AccessMembers:
		return "members"
	case AccessWrite:
		return "write"
	case AccessWork:
		return "work"
	case AccessAdmin:
		return "admin"
	case AccessStatic:
		return "static"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// Anonymous reports whether a admits requests without a credential
// (AccessAnonymous and AccessStatic).
func (a Access) Anonymous() bool { return a == AccessAnonymous || a == AccessStatic }

// Allows reports whether role r may make requests that need access a. An
// unknown role may make none but anonymous ones.
func (r Role) Allows(a Access) bool {
	if a.Anonymous() {
		return true
	}
	switch r {
	case RoleAdmin:
		return a <= AccessAdmin
	case RoleOperator:
		return a == AccessRead || a == AccessMembers || a == AccessWrite
	case RoleViewer:
		return a == AccessRead || a == AccessMembers
	case RoleWorker:
		return a == AccessMembers || a == AccessWork
	}
	return false
}
