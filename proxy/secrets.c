/* secrets.c: the passwords in use, and their SIGHUP reload (secrets.h).
 *
 * The files are read on the loop: each is at most CONF_SECRET_MAX_BYTES of
 * a local file, so reading them costs less than one limiter batch, and no
 * connection ever sees a half-replaced set. A value is swapped as a whole
 * pointer and only read when a login happens, so an upstream that is
 * connected keeps working with the password it logged in with, and the
 * next one it opens (a reconnect, a new pool or private connection) uses
 * the new one. */
#include "proxy/secrets.h"

#include "conf/conf.h"
#include "conf/conf_secret.h"
#include "proxy/core/log.h"
#include "proxy/core/util.h"
#include "proxy/server.h"

/* Room for the reason a file is refused (its path included). */
#define SECRETS_ERR_SIZE 1024

void secrets_init(void)
{
    PX_CHECK_OOM(conf_secret_values_init(&server.secrets, server.conf));
    server.core.secrets = &server.secrets;
}

int secrets_reload(void)
{
    char err[SECRETS_ERR_SIZE];
    int id, nfiles = 0;

    for (id = 0; id < CONF_SECRET_COUNT; id++) {
        const char *key = conf_secret_file_key((enum conf_secret_id)id);

        err[0] = '\0';
        switch (conf_secret_reload(server.conf, (enum conf_secret_id)id,
                                   &server.secrets, err, sizeof(err))) {
        case CONF_SECRET_NO_FILE:
            continue;
        case CONF_SECRET_CHANGED:
            log_info("SIGHUP: %s reloaded: new logins use the new password",
                     key);
            break;
        case CONF_SECRET_UNCHANGED:
            log_info("SIGHUP: %s reloaded: the password is unchanged", key);
            break;
        case CONF_SECRET_BAD:
            log_warn("SIGHUP: %s not reloaded, the old password stays in "
                     "use: %s",
                     key, err);
            break;
        case CONF_SECRET_NOMEM:
            log_warn("SIGHUP: %s not reloaded, the old password stays in "
                     "use: out of memory",
                     key);
            break;
        }
        nfiles++;
    }
    return nfiles;
}

void secrets_free(void)
{
    conf_secret_values_free(&server.secrets);
    server.core.secrets = NULL;
}
