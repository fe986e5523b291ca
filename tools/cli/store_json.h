// The JSON of the library's records (models, conversations) that several
// commands print, and the --help text that lists their keys.
#ifndef COLIKV_TOOLS_CLI_STORE_JSON_H
#define COLIKV_TOOLS_CLI_STORE_JSON_H

#include <cstdint>
#include <string>
#include <vector>

#include "colikv/model.h"
#include "colikv/store.h"
#include "args.h"
#include "json.h"

namespace colikv_cli {

// raw / stored with three decimals, or null when stored is 0.
Json ratio_json(int64_t raw, int64_t stored);

// Unix milliseconds as an ISO 8601 UTC string, or null when not set.
Json time_json(int64_t ms);

Json model_json(const colikv::ModelSignature& m);
Json conversation_json(const colikv::ConversationInfo& c);
// A tenant: name, conversations, stored_bytes, max_bytes, max_idle_ms (null: none).
Json tenant_json(const colikv::TenantInfo& t);
// The same as a human reads it, the columns of `colikv tenants`: the name
// ("" shown as such), conversations, stored bytes, quota and retention ("-": none).
std::vector<std::string> tenant_row(const colikv::TenantInfo& t);

// What the --json of a command that changes a store starts with: store (its
// location as shown, without a password) and tenant (--tenant's, "" for the
// default one). kChangeKeys lists them for --help.
Json change_json(const Args& a);
extern const char* const kChangeKeys;

// The keys of model_json and conversation_json, for --help.
extern const char* const kModelKeys;
extern const char* const kConversationKeys;
extern const char* const kTenantKeys;

}  // namespace colikv_cli

#endif  // COLIKV_TOOLS_CLI_STORE_JSON_H
