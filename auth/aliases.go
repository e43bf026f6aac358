package auth

import "github.com/jobfleet/jobfleet/api"

// Types of the documents that moved to package api.
//
// Deprecated: use the types of package api; these aliases are kept for one release.
type (
	// Deprecated: use api.Access; kept for one release.
	Access = api.Access
	// Deprecated: use api.CreateRequest; kept for one release.
	CreateRequest = api.CreateRequest
	// Deprecated: use api.Created; kept for one release.
	Created = api.Created
	// Deprecated: use api.Role; kept for one release.
	Role = api.Role
	// Deprecated: use api.Token; kept for one release.
	Token = api.Token
	// Deprecated: use api.TokenList; kept for one release.
	TokenList = api.TokenList
)

// Constants that moved to package api.
//
// Deprecated: use the constants of package api; kept for one release.
const (
	// Deprecated: use api.AccessAdmin; kept for one release.
	AccessAdmin = api.AccessAdmin
	// Deprecated: use api.AccessAnonymous; kept for one release.
	AccessAnonymous = api.AccessAnonymous
	// Deprecated: use api.AccessMembers; kept for one release.
	AccessMembers = api.AccessMembers
	// Deprecated: use api.AccessRead; kept for one release.
	AccessRead = api.AccessRead
	// Deprecated: use api.AccessStatic; kept for one release.
	AccessStatic = api.AccessStatic
	// Deprecated: use api.AccessWork; kept for one release.
	AccessWork = api.AccessWork
	// Deprecated: use api.AccessWrite; kept for one release.
	AccessWrite = api.AccessWrite
	// Deprecated: use api.RoleAdmin; kept for one release.
	RoleAdmin = api.RoleAdmin
	// Deprecated: use api.RoleOperator; kept for one release.
	RoleOperator = api.RoleOperator
	// Deprecated: use api.RoleViewer; kept for one release.
	RoleViewer = api.RoleViewer
	// Deprecated: use api.RoleWorker; kept for one release.
	RoleWorker = api.RoleWorker
)

// Roles calls api.Roles.
//
// Deprecated: use api.Roles; kept for one release.
func Roles() []api.Role { return api.Roles() }
