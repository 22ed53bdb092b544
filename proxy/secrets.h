/* The passwords in use (server.secrets): copied from the configuration at
 * start, read again from their files on SIGHUP. The core reads them when a
 * connection logs in to Redis, the AUTH command when a client logs in. */
#ifndef PX_PROXY_SECRETS_H
#define PX_PROXY_SECRETS_H

/* Fills server.secrets from server.conf and hands them to the core. */
void secrets_init(void);

/* SIGHUP: reads every *_password_file again. A good file replaces its
 * password for the logins that follow (connections and admins already
 * logged in stay so); a bad one keeps the old password. Each file gets one
 * log line, which never holds the secret. Returns the number of files
 * configured. */
int secrets_reload(void);

/* Frees server.secrets. */
void secrets_free(void);

#endif /* PX_PROXY_SECRETS_H */
