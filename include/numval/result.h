/* numval result JSON: the version of its schema.
 *
 * The result JSON that numval-worker run prints and the agent uploads (a job's
 * result with its cases, or a suite file's run), and the stored forms numvald
 * serves (GET /api/v1/jobs/{id}, /jobs/{id}/cases, /cases/{id}), are defined by
 * schema/result.schema.json (JSON Schema draft 2020-12) and described field by
 * field in docs/RESULT_SCHEMA.md. The schema's "$id" ends in this version.
 *
 * The output itself carries no version: the schema documents it as the code
 * writes it. The version changes when a field is renamed, removed or changes
 * type or meaning; adding an optional field adds it to the schema at the same
 * version. */
#ifndef NUMVAL_RESULT_H
#define NUMVAL_RESULT_H

#define NV_RESULT_SCHEMA_VERSION 1

#endif
