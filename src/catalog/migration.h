// One schema migration as compiled into the library from migrations/*.sql
// (cmake/embed_migrations.cmake): the same type for every backend.
#ifndef COLIKV_SRC_MIGRATION_H
#define COLIKV_SRC_MIGRATION_H

namespace colikv {
namespace detail {

struct Migration {
  int version;       // NNNN: the schema version once applied
  const char* name;  // file name without .sql
  const char* sql;
};

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_MIGRATION_H
