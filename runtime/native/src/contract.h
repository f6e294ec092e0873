// The artifact contract's checks in C++ (rnnx/runtime/contract/artifact.py's check list): rnnx.json (validate_metadata)
// and a state file's header (check_state_header), driven by the tables generated from the contract's records
// (contract_generated.h), so that the checks, their order and the refusal texts are Python's and JavaScript's.
#pragma once

#include "contract_generated.h"
#include "error.h"
#include "json.h"

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace rnnx
{

// A refusal's placeholders and their rendered values.
using RefusalValues = std::initializer_list<std::pair<std::string_view, std::string>>;

// `value` as a refusal shows it: compact JSON as JavaScript's JSON.stringify writes it (artifact.py's json_text; a
// string as json.h's json_text writes it).
std::string json_text(const Json& value);

// Error(status, "<where>: <the template of `reason` with `values`>", reason).
Error refusal(rnnx_status status, const std::string& where, std::string_view reason, RefusalValues values = {});

// Checks a parsed rnnx.json in the contract's order (steps 2 to 5): Error(RNNX_ERROR_METADATA) for the first check
// that fails. The native runtime generates tokens, so it refuses every interface but causal_lm
// (interface_not_runnable).
void check_metadata(const Json& meta, const std::string& where);

// Checks a state file's header metadata in kStateHeader's order, then that it was saved from the model of
// `signature`: Error(RNNX_ERROR_STATE_FILE) for the first check that fails.
void check_state_header(
    const std::map<std::string, std::string>& header, const std::string& where, const std::string& signature);

} // namespace rnnx
