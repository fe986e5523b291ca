// Options::create_staged as the store sees it: a new store's temporary file,
// made and published by its backend (SQLite's, sqlite/sqlite_staged_store.h) through
// catalog_factory.cpp, so that the store's files include no backend header.
// Not installed.
#ifndef COLIKV_SRC_STORE_STAGING_H
#define COLIKV_SRC_STORE_STAGING_H

#include <memory>
#include <string>

#include "catalog/catalog.h"
#include "colikv/options.h"

namespace colikv {
namespace detail {

class StagedStore;  // sqlite/sqlite_staged_store.h
struct StagedStoreDeleter {
  void operator()(StagedStore* s) const;  // removes its files unless published
};
using StagedStorePtr = std::unique_ptr<StagedStore, StagedStoreDeleter>;

// Null without Options::create_staged; else the new store's temporary file
// for location. Throws as Options::create_staged documents (kConflict,
// kInvalidArgument for read_only or a postgresql:// location, kNotFound, kIO).
StagedStorePtr stage_new_store(const std::string& location, const Options& options);

// The catalog of location (open_catalog), or, with staged, of its temporary
// file, whose errors then name the location.
std::unique_ptr<Catalog> open_catalog_staged(const std::string& location, const Options& options,
                                             const StagedStore* staged, StoreCounters* counters);

// Gives a staged store its name once its catalog is closed (StagedStore::publish).
void publish_staged(StagedStore& staged);

// The file a location names (colikv::store_file_of): "" for a server's.
std::string store_file_for(const std::string& location);

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_STORE_STAGING_H
