/* What a new installation frees (server.md "Revisions"): the earlier assemblies no server
 * holds, and the earlier commit's files in the Hugging Face cache unless a ref still names
 * that commit or another tool's files share its snapshot. A server holds the assembly it
 * serves by a shared lock on its model.json. */
#ifndef SPLASH_HUB_RETIRE_H
#define SPLASH_HUB_RETIRE_H

#include "server/hub/progress.h"

/* Holds the assembly dir for this process's life (the descriptor stays open); -1 on
 * failure. */
int splash_hub_hold(const char *assembly_dir);

/* Removes inst_dir's assemblies other than keep_commit's that nobody holds, then their
 * commits' files in repo_dir as above; repo_dir "" (local files) frees no file. Says what it kept and why through line. */
void splash_hub_retire(const char *inst_dir, const char *keep_commit, const char *repo_dir,
                       splash_hub_line_fn line);

/* The models folder's sweep (server.md "Files Splash writes"), run under the installation
 * lock by every installation and preparation: each installation's assemblies other than
 * the current one that no server holds, installations that never completed or whose local
 * files are gone (no preparation returns them) once no server holds them, and the work
 * folders of processes that died. A Hub installation with a missing file is kept for its
 * next start to rebuild from the cache. */
void splash_hub_sweep(const char *models_dir, splash_hub_line_fn line);

#endif
